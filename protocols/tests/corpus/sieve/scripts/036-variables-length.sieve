require ["variables", "fileinto", "relational", "comparator-i;ascii-numeric"];
set :length "len" "${subject}";
if header :matches "subject" "*" { set :length "len" "${1}"; }
if string :value "gt" :comparator "i;ascii-numeric" "${len}" "20" { fileinto "LongSubject"; }
