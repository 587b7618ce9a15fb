require ["fileinto", "mailbox"];
if header :contains "subject" "invoice" { fileinto :create "Bills"; }
