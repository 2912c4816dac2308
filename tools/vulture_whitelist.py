"""Names vulture reports as unused that are used — each with who uses it.

`make lint` runs `vulture` (its settings: `[tool.vulture]` in pyproject.toml) over
src/pmsgate and this file; a name written here counts as used. vulture matches names, not
places: one line covers every definition of the name. This file is read, never run.

Add a name only when something outside Python's sight uses it (a template, a serialiser,
a framework calling in), and say which. Code that only tests use is dead: delete it and
let the test use what the application uses.
"""

from vulture.whitelist_utils import Whitelist

_ = Whitelist()

# --- read by the Jinja templates (src/pmsgate/web/templates/) ---------------------------------
_.pending_items, _.confirmable, _.reopenable  # admin_customer.html
_.by_route, _.waiting_customers, _.waiting_steps, _.overdue_steps  # admin_home.html
_.sort_url  # the sortable tables (admin_home.html, incidents.html)
_.filtered, _.matched, _.pages_shown  # admin_home.html
_.error_percent, _.more_history, _.token_obtained_at  # the connection-health panel
_.token_expires_at  # the connection-health panel
_.time_label  # customer.html (a usage snapshot's time)
_.day_label, _.sync_applies, _.event_days, _.route_b_sentence  # customer.html
_.subject_words, _.customer_told_at, _.team_told_at  # incident pages
_.scope_choices  # the key-minting form

# --- settings read by name ------------------------------------------------------------------
_.usage_refresh_interval_s  # deprecated: folded into job_intervals_s by its validator (config.py)
_.listings_sync_interval_s  # deprecated: folded into job_intervals_s by its validator (config.py)
_.pms_check_interval_s  # deprecated: folded into job_intervals_s by its validator (config.py)
_.usage_flush_interval_s  # deprecated: folded into job_intervals_s by its validator (config.py)

# --- fields of a serialised shape: written to JSON or a database, read by what reads those ---
_.upsell_autonomous  # skills.yaml profile flags (CustomerProfile), read by name
_.late_checkin_autonomous  # skills.yaml profile flags (CustomerProfile), read by name
_.page_read  # knowledge sync reports (JSON of the API and `pmsgate knowledge sync`)
_.active_listings  # the dry-run report (JSON)
_.body_block_ids  # a template section's match (JSON evidence of onboarding step 13)
_.logs, _.run_time_ms  # the assistant platform's custom-tool run answer (wire model)
_.entrypoint, _.return_contract  # the assistant platform's custom-tool runtime (wire model)
_.reservation_confirmation_code  # the booking system's reservation (wire model)
_.cod_reservation  # the booking system's reservation dates (wire model)
_.strikethrough, _.underline  # a Notion rich-text annotation (wire model)
_.auto_assign_to_existing_v2_agents  # the assistant emulator's request bodies (its schema)
_.responseflow, _.custom_response_delay_ms  # the assistant emulator's request bodies (its schema)
_.auto_mark_as_done, _.output_schema  # the assistant emulator's request bodies (its schema)
_.autopilot_schedule  # the assistant emulator's request bodies (its schema)
_.picture  # the booking-system emulator's seed records
_.spent_at  # a database column (form_tokens), written by its repository
_.acknowledged_at  # a database column (incidents), written by its repository
_.synced_at  # a database column (knowledge_pages), written by its repository
_.open_key  # a database column (incidents), its unique index
# The tools' answer models (catalogue/tools.py): their JSON Schemas are the OpenAPI 200s and
# the MCP outputSchemas; the answers are made as JSON by gateway/tools.py.
_.skipped_rows, _.truncated_reason, _.window_note, _.nights_free, _.nights_asked, _.total_price
_.available_count, _.unknown_reservations

# --- called in by a framework, or named only in an annotation ----------------------------------
_.capture_signals  # uvicorn.Server's method, overridden (app.py)
_.tb  # __aexit__'s traceback parameter
_.heads, _.run_args  # alembic's on_version_apply callback parameters (storage/db.py)
_.opentelemetry  # the probe of whether the optional extra pmsgate[otel] is installed

# --- NOT TRIAGED HERE: reported unused (nothing in src/ uses them; most only tests), in files
# other engineers were changing when this list was made. Their owners delete them, or move
# the name to a section above with who uses it. Keep this section shrinking, never growing.
_.PROBE_REQUESTS  # doctor/kross.py
_.old_key  # gateway/admin.py
_.TRANSPORTS  # gateway/call_log.py
_.pending_key_uses  # gateway/facility_service.py
_._Limits, _.clock_offset_ms  # gateway/limiter.py
_.wait_applied  # gateway/pubsub.py
_.REQUEST_ID_HEADER  # request_context.py
_.allows_import  # integrations/assistant/client.py (the client's API used only by tests)
_.get_custom_tool, _.delete_custom_tool, _.custom_tool_runtimes  # integrations/assistant/client.py
_.get_agent, _.nodes_page, _.get_node, _.list_roles  # integrations/assistant/client.py
_.dropped_unreadable, _.server_ignored_filter  # integrations/kross/dates.py
_.REQUEST_OUTCOMES  # integrations/kross/errors.py
_.is_complete  # integrations/kross/models.py
_.HouseManual  # integrations/kross/models.py (wire models of operations never called)
_.ReservationDates, _.GuestRegistered, _.PicturesSaved  # integrations/kross/models.py
_.saved  # integrations/kross/models.py (PicturesSaved's field)
_.paragraph  # integrations/notion/builders.py (block builders used by the emulator's tests)
_.bulleted_list_item, _.numbered_list_item, _.divider  # integrations/notion/builders.py
_.get_block, _.set_text, _.delete_block  # integrations/notion/client.py
_.forget_view  # ratelimit.py
_.error_ms  # ratelimit.py (written, read only by tests)
_.active_tokens  # sandbox/kross/store.py
_.needs_payment_link_generator  # storage/customers.py
_.facility_status  # storage/admin_overview.py (selected, never read)
_.current_revision  # storage/db.py
_.AuditOutcome, _.AuditActorKind, _.ToolCallSource  # storage/models.py
_.count_for  # storage/users.py
_.Int64  # boundary.py
_.Admin  # web/auth.py
_.MaybePrincipal  # web/pages.py
_.drawn, _.time_labels  # web/charts.py
_.earliest, _.last_update  # web/customer_view.py (written, never read)
_.active_sync  # web/views.py (written, never read)
_.invitation_sent  # web/invitations.py (read only by tests)
_.store_reads  # gateway/cache.py
_.kept_answers  # gateway/tools.py
_.iter_nodes  # integrations/assistant/knowledge.py
_.indexed_at  # sandbox/assistant/store/ (knowledge.py, records.py)
_.update_tool, _.delete_tool  # sandbox/assistant/store/tools.py

# --- the OAuth authorization server (src/pmsgate/oauth/) ---------------------------------------
_.redirect_host  # oauth_consent.html
_.revoked_by  # oauth_grants.html (who ended a grant)
# The MCP SDK's OAuthAuthorizationServerProvider protocol, called by its handlers
# (oauth/server.py BoundProvider).
_.get_client, _.register_client, _.load_authorization_code, _.exchange_authorization_code
_.exchange_refresh_token, _.exchange_identity_assertion

# --- signed event webhooks (src/pmsgate/webhooks/) ---------------------------------------------
_.delivered_at  # webhooks.html (when a delivery was acknowledged)

# --- fields read by name (serialised, or a table of names) -------------------------------------
# The guest of check-in-guest: validated and sent on the wire, never read one by one
# (integrations/kross/models.py GuestDetails, the emulator's wire.py and records.py).
_.birth_date, _.nationality, _.document_type, _.document_number
# The knowledge sync's report counters: written by name, read through the report's JSON.
_.directories_created, _.blocked_by_template, _.incomplete_templates
# The notion seed's ground truth of a page: read by tests and the demo through asdict().
_.sections_missing, _.section_titles, _.section_kinds, _.first_toggle_mentions_wifi
_.stray_wifi_mentions, _.toggle_count
