require "fileinto";
if header :contains ["subject", "from"] ["prize", "github", "newsletter"] { fileinto "Noise"; }
