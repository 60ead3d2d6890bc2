//! The project as a user reads and runs it, no network beyond loopback: `mcp-edge check` and
//! `serve` on good and bad files (`cli_check`), the committed JSON Schema against what
//! `mcp-edge schema` prints and what the loader refuses (`config_schema`), and the documents'
//! links, paths, Quick start commands and config examples (`docs`), and the gateway's layers
//! read from its source (`layers`), no import cycle outside it (`cycles`), and one module style
//! (`style`), the source read by one reader (`source`). Needs only the `mcp-edge` binary.

mod cli_check;
mod config_schema;
mod cycles;
mod docs;
mod layers;
mod source;
mod style;
