-- dropping the function drops the triggers that call it (wake_*)
DROP FUNCTION wake_notify() CASCADE;
DROP TABLE wake_interest;
