if header :contains "subject" "lunch" { stop; }
discard;
