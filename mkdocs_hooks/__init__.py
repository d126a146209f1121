"""What `mkdocs build` generates from the code and the repository: the schema reference, the settings table, the
sections pages include from files outside docs/, and links to those files."""
