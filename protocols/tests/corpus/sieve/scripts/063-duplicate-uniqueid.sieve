require ["duplicate", "variables", "fileinto"];
if header :matches "subject" "*" { set "s" "${1}"; }
if duplicate :uniqueid "${s}" :seconds 60 { discard; }
