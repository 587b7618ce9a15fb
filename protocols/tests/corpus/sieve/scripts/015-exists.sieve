require "fileinto";
if exists "list-id" { fileinto "Lists"; }
if not exists "message-id" { fileinto "NoId"; }
if exists ["x-spam-flag", "x-spam-score"] { fileinto "Scored"; }
