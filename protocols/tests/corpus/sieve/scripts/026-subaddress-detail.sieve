require ["envelope", "fileinto", "subaddress", "imap4flags"];
if envelope :detail :is "to" "invoices" { fileinto "Invoices"; }
if envelope :user :is "to" "me" { addflag "\\Seen"; }
