require ["mailbox", "fileinto"];
if mailboxexists "INBOX" { fileinto "HasInbox"; }
if mailboxexists "Nope-Not-Here" { fileinto "Impossible"; }
