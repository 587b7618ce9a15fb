require "fileinto";
if size :over 2K { fileinto "Big"; }
if size :under 300 { fileinto "Tiny"; }
