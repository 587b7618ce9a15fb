require "imap4flags";
if header :contains "subject" "urgent" { setflag "\\Flagged"; }
addflag "\\Seen";
