require ["variables", "fileinto"];
if header :matches "subject" "*o*e*" { fileinto "${1}|${2}|${3}"; }
