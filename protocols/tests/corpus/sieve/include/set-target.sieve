require ["include", "variables"];
global "target";
if header :contains "subject" "lunch" { set "target" "Food"; }
