redirect "a@example.com";
redirect "b@example.com";
redirect "c@example.com";
redirect "d@example.com";
if header :contains "subject" "lunch" { redirect "e@example.com"; }
