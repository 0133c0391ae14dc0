-- Down keeps the rows as they are: a refusal recorded after 008 has no call key to
-- return to that the call may not have taken since, and a row resolved and moved on
-- would break the CHECK 008 removed, which therefore stays removed.
SELECT 1;
