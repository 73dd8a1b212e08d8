"""A catalogue of 100 tools (20 domains x 5 verbs) served by one MCP server (official SDK, low
level), and 50 queries written from their descriptions, for bench/mcp_deferred.py.

    python bench/mcp_catalog.py      # serves the 100 tools over stdio
"""

from __future__ import annotations

from typing import Any

DOMAINS: list[tuple[str, str, str]] = [
    ("invoice", "invoices in the billing ledger", "amount"),
    ("calendar_event", "meetings on the team calendar", "start_time"),
    ("ticket", "support tickets in the helpdesk queue", "priority"),
    ("repository", "source code repositories on the forge", "visibility"),
    ("dns_record", "DNS records of a hosted zone", "ttl"),
    ("user_account", "user accounts in the identity directory", "email"),
    ("shipment", "parcel shipments tracked with the courier", "tracking_number"),
    ("playlist", "music playlists in the streaming library", "track_ids"),
    ("recipe", "cooking recipes in the kitchen cookbook", "ingredients"),
    ("vm_instance", "virtual machine instances in the cloud project", "machine_type"),
    ("contract", "legal contracts awaiting e-signature", "signatory"),
    ("sensor_reading", "temperature sensor readings from the greenhouse", "sensor_id"),
    ("flight_booking", "airline flight bookings of the traveller", "seat"),
    ("spreadsheet", "spreadsheets in the shared drive", "sheet_name"),
    ("feature_flag", "feature flags of the rollout service", "percentage"),
    ("payroll_run", "payroll runs for the employees", "pay_period"),
    ("backup_snapshot", "database backup snapshots in cold storage", "retention_days"),
    ("chat_channel", "chat channels of the workspace messenger", "topic"),
    ("inventory_item", "warehouse inventory stock items", "sku"),
    ("translation", "translation strings of the localisation catalogue", "locale"),
]
VERBS: list[tuple[str, str]] = [
    ("create", "Create a new one of the {what}, with its {field}."),
    ("delete", "Delete (remove permanently) one of the {what} by id."),
    ("list", "List all the {what}, filtered and paginated."),
    ("get", "Fetch the details of one of the {what} by id."),
    ("update", "Update (modify, change) the {field} of one of the {what}."),
]


def catalogue() -> list[dict[str, Any]]:
    out = []
    for noun, what, field in DOMAINS:
        for verb, text in VERBS:
            props: dict[str, Any] = {"id": {"type": "string", "description": "The identifier."}}
            props[field] = {"type": "string", "description": f"The {field.replace('_', ' ')}."}
            props["options"] = {
                "type": "object",
                "description": "Advanced options: dry run, idempotency key, request timeout, tracing headers.",
                "properties": {
                    "dry_run": {"type": "boolean", "description": "Validate only; change nothing."},
                    "idempotency_key": {"type": "string", "description": "Deduplicate retried requests."},
                    "timeout_s": {"type": "number", "description": "Give up after this many seconds."},
                },
            }
            out.append(
                {
                    "name": f"{verb}_{noun}",
                    "description": text.format(what=what, field=field.replace("_", " ")),
                    "inputSchema": {"type": "object", "properties": props, "required": ["id"]},
                }
            )
    return out


# 50 queries written from the descriptions (not the names), each with the tool it means.
QUERIES: list[tuple[str, str]] = [
    ("add a new invoice with its amount to the billing ledger", "create_invoice"),
    ("remove a meeting from the team calendar permanently", "delete_calendar_event"),
    ("show all support tickets in the helpdesk queue", "list_ticket"),
    ("details of one source code repository on the forge", "get_repository"),
    ("change the ttl of a DNS record in the hosted zone", "update_dns_record"),
    ("new user account in the identity directory with an email", "create_user_account"),
    ("track parcel shipments with the courier, list them", "list_shipment"),
    ("permanently remove a music playlist from the streaming library", "delete_playlist"),
    ("fetch one cooking recipe from the kitchen cookbook", "get_recipe"),
    ("modify the machine type of a virtual machine instance in the cloud project", "update_vm_instance"),
    ("new legal contract awaiting e-signature with a signatory", "create_contract"),
    ("all temperature readings from the greenhouse sensors", "list_sensor_reading"),
    ("cancel and remove an airline flight booking of the traveller", "delete_flight_booking"),
    ("details of a spreadsheet in the shared drive", "get_spreadsheet"),
    ("change the rollout percentage of a feature flag", "update_feature_flag"),
    ("start a new payroll run for a pay period for the employees", "create_payroll_run"),
    ("list database backup snapshots in cold storage", "list_backup_snapshot"),
    ("remove a chat channel of the workspace messenger", "delete_chat_channel"),
    ("fetch a warehouse inventory stock item by id", "get_inventory_item"),
    ("modify a translation string locale in the localisation catalogue", "update_translation"),
    ("fetch the details of an invoice in the billing ledger", "get_invoice"),
    ("list the meetings on the team calendar", "list_calendar_event"),
    ("update the priority of a support ticket", "update_ticket"),
    ("delete a source code repository from the forge", "delete_repository"),
    ("new DNS record with a ttl in the hosted zone", "create_dns_record"),
    ("list all user accounts in the identity directory", "list_user_account"),
    ("change the tracking number of a parcel shipment", "update_shipment"),
    ("fetch one playlist from the music streaming library", "get_playlist"),
    ("create a cooking recipe with ingredients in the cookbook", "create_recipe"),
    ("permanently remove a virtual machine instance from the cloud project", "delete_vm_instance"),
    ("list legal contracts awaiting e-signature", "list_contract"),
    ("fetch a greenhouse temperature sensor reading by id", "get_sensor_reading"),
    ("change the seat of an airline flight booking", "update_flight_booking"),
    ("create a new spreadsheet with a sheet name in the shared drive", "create_spreadsheet"),
    ("delete a feature flag of the rollout service", "delete_feature_flag"),
    ("details of one payroll run of the employees", "get_payroll_run"),
    ("modify the retention days of a database backup snapshot", "update_backup_snapshot"),
    ("new chat channel with a topic in the workspace messenger", "create_chat_channel"),
    ("all warehouse inventory stock items, paginated", "list_inventory_item"),
    ("remove a translation string from the localisation catalogue", "delete_translation"),
    ("update the amount of an invoice in the billing ledger", "update_invoice"),
    ("fetch a meeting on the team calendar by id", "get_calendar_event"),
    ("open a new support ticket with a priority in the helpdesk queue", "create_ticket"),
    ("change the visibility of a source code repository", "update_repository"),
    ("fetch one DNS record of the hosted zone", "get_dns_record"),
    ("remove a user account from the identity directory permanently", "delete_user_account"),
    ("fetch the details of one parcel shipment", "get_shipment"),
    ("list all music playlists in the streaming library", "list_playlist"),
    ("remove a cooking recipe from the kitchen cookbook", "delete_recipe"),
    ("list the virtual machine instances in the cloud project", "list_vm_instance"),
]


def serve() -> None:
    import anyio
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    tools = [types.Tool.model_validate(t) for t in catalogue()]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"{params.name} ok")])

    server = Server("catalogue", on_list_tools=list_tools, on_call_tool=call_tool)

    async def main() -> None:
        async with stdio_server() as (r, w):
            await server.run(r, w, server.create_initialization_options())

    anyio.run(main)


if __name__ == "__main__":
    serve()
