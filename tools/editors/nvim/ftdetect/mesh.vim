" Mesh source files (meshc): *.msh
autocmd BufRead,BufNewFile *.msh setfiletype mesh
