require ["date", "fileinto", "variables"];
if date :zone "+0000" "date" "year" "1999" { fileinto "Old"; }
if date :matches :zone "+0000" "date" "date" "*" { set "d" "${1}"; }
if string :matches "${d}" "2026-12-0?" { fileinto "EarlyDec"; }
