"""The notes workspace (Notion API): the client (``client``), its errors (``errors`` +
``errors.yaml``), throttle (``throttle``), objects as read (``models``), blocks as written
(``builders``) and appends split to the API's limits (``appends``)."""
