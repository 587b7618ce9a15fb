require ["body", "fileinto"];
if body :raw :contains "JVBERi0" { fileinto "PDF"; }
if body :raw :contains "caf=C3=A9" { fileinto "QP"; }
