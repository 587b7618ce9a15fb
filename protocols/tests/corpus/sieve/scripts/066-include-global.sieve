require ["include", "variables", "fileinto"];
global "target";
set "target" "Fallback";
include :personal "set-target";
fileinto "${target}";
