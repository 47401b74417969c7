# Sourced by the ladder's scripts (from the recipe dir, egs/aishell_sim).
workdir() {
  # workdir DIR: a work dir for run.sh --workdir, its shared parts linked to the recipe's
  mkdir -p "$1"
  for f in conf steps utils local cmd.sh; do
    [ -e "$1/$f" ] || ln -s "$PWD/$f" "$1/$f"
  done
  # the recipe's path.sh finds the repository from its own location: here, name it
  echo ". \"$(cd ../.. && pwd)/path.sh\"" > "$1/path.sh"
}
