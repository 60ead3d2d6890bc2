//! The four list methods of the protocol: what each is called, which result member holds its
//! entries, which field names an entry, which capability announces it, and which method's
//! permission decides whether a caller sees an entry. Shared by the auth list filter and
//! federation.

use super::methods;

/// The four lists a pool can serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Kind {
    Tools,
    Prompts,
    Resources,
    Templates,
}

impl Kind {
    pub(crate) const ALL: [Kind; 4] =
        [Kind::Tools, Kind::Prompts, Kind::Resources, Kind::Templates];

    /// The list method answered with this kind.
    pub(crate) fn of_method(method: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.method() == method)
    }

    pub(crate) fn method(self) -> &'static str {
        match self {
            Kind::Tools => methods::TOOLS_LIST,
            Kind::Prompts => methods::PROMPTS_LIST,
            Kind::Resources => methods::RESOURCES_LIST,
            Kind::Templates => methods::RESOURCES_TEMPLATES_LIST,
        }
    }

    /// The result member holding the entries.
    pub(crate) fn member(self) -> &'static str {
        match self {
            Kind::Tools => "tools",
            Kind::Prompts => "prompts",
            Kind::Resources => "resources",
            Kind::Templates => "resourceTemplates",
        }
    }

    /// The entry field that names an entry.
    pub(crate) fn field(self) -> &'static str {
        match self {
            Kind::Tools | Kind::Prompts => "name",
            Kind::Resources => "uri",
            Kind::Templates => "uriTemplate",
        }
    }

    /// The capability (in `server/discover`) that says a server has this list.
    pub(crate) fn capability(self) -> &'static str {
        match self {
            Kind::Tools => "tools",
            Kind::Prompts => "prompts",
            Kind::Resources | Kind::Templates => "resources",
        }
    }

    pub(crate) fn label(self) -> &'static str {
        self.member()
    }

    /// The method whose permission decides whether an entry of this list is shown to a caller
    /// (`tools/call` for a tool: a tool is listed when calling it would be allowed).
    pub(crate) fn call(self) -> &'static str {
        match self {
            Kind::Tools => methods::TOOLS_CALL,
            Kind::Prompts => methods::PROMPTS_GET,
            Kind::Resources | Kind::Templates => methods::RESOURCES_READ,
        }
    }
}
