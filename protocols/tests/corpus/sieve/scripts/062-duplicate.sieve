require ["duplicate", "fileinto"];
if duplicate { fileinto "Dups"; }
