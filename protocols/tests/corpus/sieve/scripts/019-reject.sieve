require "reject";
if header :contains "subject" "prize" { reject "We do not accept prize mail."; }
