"""The notes workspace (Notion API): client (``client``) and its error table."""
