"""``sparkraft console``: a read-only web console over a warehouse, now and at any cut of its history.

- ``model``: what each page shows, read from the warehouse's Delta tables at a cut (Arrow, cached
  per cut, so a 200,000-partition page is a filter and a slice, not a table read);
- ``history``: the timeline of the metadata log and what changed between two cuts;
- ``sql_guard``: the SQL box runs read-only statements only;
- ``quorum_view``: the quorum as the controllers describe it (when the console is given them);
- ``app``: the Starlette application (pages, CSV downloads, server-sent events for new cuts);
- ``serve``: uvicorn, bound to 127.0.0.1 unless told otherwise, TLS and client certificates
  required to listen anywhere else.
"""
