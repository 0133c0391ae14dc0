DROP TABLE deployment_secrets;
