// `sqlx::migrate!` embeds the migration files at compile time; a new or changed file must rebuild
// the crate (stable Rust cannot tell the macro's file reads to cargo).
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
