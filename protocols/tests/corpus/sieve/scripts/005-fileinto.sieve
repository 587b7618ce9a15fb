require "fileinto";
fileinto "Archive";
