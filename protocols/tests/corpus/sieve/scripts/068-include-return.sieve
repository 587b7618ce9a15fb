require ["include", "fileinto"];
include :once "returns";
include :once "returns";
fileinto "After";
