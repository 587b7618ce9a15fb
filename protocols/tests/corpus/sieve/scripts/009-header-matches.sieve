require "fileinto";
if header :matches "subject" "[*]*" { fileinto "Lists"; }
elsif header :matches "subject" "*?:*" { fileinto "Prefixed"; }
