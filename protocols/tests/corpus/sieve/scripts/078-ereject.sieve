require "ereject";
if header :contains "subject" "prize" { ereject "No."; }
