require ["editheader", "fileinto"];
deleteheader "x-spam-flag";
if not exists "x-spam-flag" { fileinto "Clean"; }
