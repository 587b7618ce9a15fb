require ["fileinto", "imap4flags"];
fileinto "A";
fileinto "A";
keep;
keep :flags "\\Seen";
redirect "x@example.com";
redirect "X@Example.com";
