require ["vacation", "fileinto"];
vacation "Away";
fileinto "WhileAway";
