require ["vacation-seconds"];
if header :contains "subject" "lunch" { vacation :seconds 3600 "Back in an hour."; }
