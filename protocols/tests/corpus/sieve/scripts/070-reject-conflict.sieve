require ["reject", "fileinto"];
if header :contains "subject" "prize" { fileinto "Junk"; reject "no"; }
