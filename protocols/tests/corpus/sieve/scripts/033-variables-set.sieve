require ["variables", "fileinto"];
set "folder" "Projects";
if header :contains "subject" "plan" { fileinto "${folder}"; }
