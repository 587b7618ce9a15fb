require "imap4flags";
keep :flags "\\Deleted";
