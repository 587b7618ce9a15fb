require ["imap4flags", "fileinto"];
if exists "x-spam-flag" { fileinto :flags ["\\Seen", "$Junk"] "Junk"; }
