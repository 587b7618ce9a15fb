require ["include", "fileinto"];
if true { fileinto "Included"; return; }
fileinto "NeverHere";
