require ["fileinto", "copy"];
fileinto :copy "Backup";
