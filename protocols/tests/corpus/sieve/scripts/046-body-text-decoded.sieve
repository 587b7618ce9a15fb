require ["body", "fileinto"];
if body :text :contains "password" { fileinto "Decoded"; }
if body :text :contains "sale" { fileinto "Sale"; }
