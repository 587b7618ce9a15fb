require ["variables", "fileinto"];
set :quotewildcard "pat" "a*b?c";
if string :is "${pat}" "a\\*b\\?c" { fileinto "Quoted"; }
