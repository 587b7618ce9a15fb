require ["variables", "fileinto", "envelope"];
if envelope :all :matches "from" "*@*" { set "dom" "${2}"; }
if string :is "${dom}" "example.net" { fileinto "Net"; }
