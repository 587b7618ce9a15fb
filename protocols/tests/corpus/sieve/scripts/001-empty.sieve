# nothing: implicit keep
