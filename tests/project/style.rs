//! One module style: a module with submodules is a folder with its `mod.rs`, never a `foo.rs`
//! beside a `foo/` folder, so a reader finds every module of a folder the same way.

use std::path::{Path, PathBuf};

use super::source::rust_files;

#[test]
fn a_module_with_submodules_is_a_folder_with_its_mod_rs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let beside: Vec<PathBuf> = files
        .into_iter()
        .filter(|f| f.file_name().is_some_and(|n| n != "mod.rs"))
        .filter(|f| f.with_extension("").is_dir())
        .collect();
    assert!(
        beside.is_empty(),
        "a file beside its module's folder (move it to <folder>/mod.rs): {beside:?}"
    );
}
