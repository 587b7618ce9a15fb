require "imap4flags";
setflag ["\\Seen", "\\Flagged", "$Work"];
removeflag "\\Flagged";
if header :contains "subject" "meeting" { addflag "\\Answered"; }
