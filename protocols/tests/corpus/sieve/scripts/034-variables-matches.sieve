require ["variables", "fileinto"];
if header :matches "subject" "[*] *" { fileinto "List-${1}"; }
